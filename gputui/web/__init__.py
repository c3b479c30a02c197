"""`gputui serve`'s web server: the app's screens in a browser, one app process per page (server.py)."""
