"""`nmtkit serve`: the HTTP JSON service (app.py), its settings (config.py), what a request may ask (requests.py)
and the cap on open connections (connections.py)."""
