"""The app's pages, one module per view of the sidebar: each has `render(ctx)` (views/plumbing/router.py
holds the registry)."""
