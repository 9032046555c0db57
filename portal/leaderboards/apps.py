from django.apps import AppConfig


class LeaderboardsConfig(AppConfig):
    name = "portal.leaderboards"
    label = "leaderboards"
