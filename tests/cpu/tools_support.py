"""What tests/cpu/test_user_tools.py and tests/cpu/test_readme_commands.py share: the commands README.md shows, and a
snapshot of the clone's files (to show that a command changed nothing)."""
import os
import re

from conftest import ROOT

# The environment tools/setup.sh makes (the README's `source .venv/bin/activate`).
VENV = os.path.join(ROOT, ".venv")
HAS_VENV = os.path.exists(os.path.join(VENV, "bin", "activate"))

# Shown in the README but not run by the tests: installing builds the extension again (tools/check_package.sh
# builds and installs a wheel); activating is what every command run in a fresh shell does first.
NOT_RUN = ("pip install", "source .venv/bin/activate")
_COMMAND = re.compile(r"^(?:python3? |\./tools/|tools/|\.ci/)")


def readme_commands():
    """Every command README.md shows: the lines of its bash blocks and its inline code that starts like a command
    (python ..., ./tools/..., tools/..., .ci/..., pip install, source), comments dropped, in order, once each."""
    text = open(os.path.join(ROOT, "README.md")).read()
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        found += [line.split(" #")[0].strip() for line in block.splitlines()]
    found += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    commands = []
    for c in found:
        if c and c not in commands and not c.split()[0].endswith("/") and (_COMMAND.match(c) or
                                                                           c.startswith(NOT_RUN)):
            commands.append(c)
    return commands


def program(command):
    """The script a command runs (its file, or `-m module`), e.g. benchmarks/eval.py, ./tools/run.sh -> tools/run.sh."""
    words = command.split()
    if words[0] in ("python", "python3"):
        return " ".join(words[1:3]) if words[1] == "-m" else words[1]
    return os.path.normpath(words[0])


def snapshot():
    """What a command could have changed: the clone's top-level entries, and every file's size and time outside the
    places Python, builds and git write to (__pycache__, .venv, build, .git)."""
    state = {"top": sorted(os.listdir(ROOT))}
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in ("__pycache__", ".venv", ".git", "build")]
        for f in files:
            p = os.path.join(d, f)
            st = os.stat(p)
            state[p] = (st.st_size, st.st_mtime_ns)
    return state


def changes(before, after):
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
