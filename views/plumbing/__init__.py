"""The app's plumbing: the router, state and the URL, the figure cache and warm-up, the server's
folders and jobs, and Streamlit's private names (every page runs through these; none draws a page)."""
