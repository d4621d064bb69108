"""Who may read: signed client tokens (``tokens``: JWT HS256, the streams a token grants) and ``sparkwire
token`` (``token_cli``), which mints them."""
