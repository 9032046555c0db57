"""The PKB problem suite: one module per problem, discovered by ``problems.registry``."""

from .registry import all_problems, get, source_text, version
from .spec import Problem

__all__ = ["Problem", "all_problems", "get", "source_text", "version"]
