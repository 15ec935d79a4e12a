"""The app's views, the only code besides app.py that calls st.*, in three rooms:

- pages/: one module per view of the sidebar, each with render(ctx);
- parts/: what pages share or put together (widgets, the header, side by side, the quiz, the lab's parts);
- plumbing/: what every page runs through (the router, state and the URL, the figure cache, prefetch, warm-up).
"""
