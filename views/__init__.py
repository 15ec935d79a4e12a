"""The app's views, the only code besides app.py that calls st.*, in three rooms, and the live poll's store:

- pages/: one module per view of the sidebar, each with render(ctx);
- parts/: what pages share or put together (widgets, the header, side by side, the quiz, the lab's parts);
- plumbing/: what every page runs through (the router, state and the URL, the figure cache, warm-up);
- rooms/: the quiz's live poll, rooms and answers kept outside the Streamlit process (SQLite or Redis), which
  calls no st.* (the presenter's part is parts/poll.py, the phones' page pages/room.py).
"""
