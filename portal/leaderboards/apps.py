from django.apps import AppConfig


class LeaderboardsConfig(AppConfig):
    name = "portal.leaderboards"
    label = "leaderboards"

    def ready(self) -> None:
        from . import cache

        cache.connect()
