"""Helpers shared by the portal apps that are not apps themselves."""
