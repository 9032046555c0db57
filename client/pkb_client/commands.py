"""The remote commands and what ``pkb --help`` says of each. No imports: the local evaluator's
``pkb`` lists these beside its own commands without loading ``requests``."""

COMMAND_HELP = {
    "login": "get an API token and store it in ~/.config/pkb/",
    "submit": "submit one kernel file to a portal",
    "run": "runs, a model's sample set: create, add, status, scores, import",
    "prompt": "print a problem's prompt from a portal",
    "agent": "prompt, generate, submit, read the failure, retry",
}
COMMANDS = tuple(COMMAND_HELP)
