"""Who may read: signed client tokens (``tokens``: JWT HS256 with a shared secret or RS256/ES256 from an
identity provider, the streams a token grants), where their keys come from (``keys``: the secret, a JWKS URL,
a key file), and ``sparkwire token`` (``token_cli``), which mints HS256 ones."""
