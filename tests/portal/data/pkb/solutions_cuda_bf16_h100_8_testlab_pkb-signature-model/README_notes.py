# A file that is not named <id>_<name>_<backend>.py.
