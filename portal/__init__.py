"""PKB Portal: the Django site (catalog, submissions, leaderboards, accounts, API)."""
