"""The PKB Portal's remote client: ``pkb login``, ``submit``, ``run``, ``prompt``, ``agent``.

Standard library plus ``requests`` only, so it installs in seconds on a machine with no GPU,
Django or torch. Exit codes (``pkb_client.exits``) are stable for scripts.
"""

__version__ = "0.1.0"
