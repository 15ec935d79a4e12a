"""The app's pages: each module has render(ctx) and is the only code besides app.py that calls st.*."""
