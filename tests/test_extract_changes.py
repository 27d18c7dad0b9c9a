"""Files changed: what each successful write, edit or patch of a tool call changed, read from the call and its
result, for every client shape (shell tools, text agents, editor tools, apply_patch); a failed call changes
nothing; hostile commands are read in linear time."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.adversarial import adversarial_texts  # noqa: E402
from proxy.extract import extract  # noqa: E402
from proxy.extract.changes import file_changes, shell_script  # noqa: E402
from proxy.ingest import extract_at  # noqa: E402
from proxy.records import CHANGED, MessageContext, ToolCall  # noqa: E402

OK = "<returncode>0</returncode>\n<output>\n</output>"


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=json.dumps(arguments))


def changed(command: str | ToolCall, output: str = OK) -> dict[str, str]:
    """The files a tool result says changed, as the state's ledger gets them: path -> how."""
    tool_call = call("bash", command=command) if isinstance(command, str) else command
    message = {"role": "tool", "tool_call_id": tool_call.id, "content": output}
    extraction = extract(message, MessageContext(index=7, ref="ev7", call=tool_call))
    found = {f.key: f.value for f in extraction.facts if f.kind == CHANGED}
    assert all(f.evidence_ref == "ev7" and f.turn == 7 for f in extraction.facts if f.kind == CHANGED)
    return found


# ---- shell ----------------------------------------------------------------------------------------------------


def test_sed_in_place_deep_in_a_chain_of_commands() -> None:
    command = (
        "cd /testbed && grep -n \"cright\\[-right\" astropy/modeling/separable.py && "
        "sed -i 's/cright\\[-right.shape\\[0\\]:, -right.shape\\[1\\]:\\] = 1/cright[-right.shape[0]:, "
        "-right.shape[1]:] = right/; s/a;b/c/' astropy/modeling/separable.py && "
        "sed -n '240,250p' astropy/modeling/separable.py && sed 's/x/y/' setup.cfg | head -3"
    )
    output = ("<returncode>0</returncode>\n<output>\n245:        cright[-right.shape[0]:, -right.shape[1]:] = 1\n"
              "    else:\n        raise ModelDefinitionError('Error: cannot stack')\n"
              "        cright[-right.shape[0]:, -right.shape[1]:] = right\n</output>")
    # the file sed -n prints quotes an error message: it is the file's text, not the command failing
    assert changed(command, output) == {"astropy/modeling/separable.py": "edited (sed -i)"}


def test_sed_options_suffixes_and_several_files() -> None:
    assert changed("sed -i.bak -e 's/old/new/' -e '/^#/d' src/App.py src/Config.py") == {
        "src/App.py": "edited (sed -i)", "src/Config.py": "edited (sed -i)"}  # the case kept as written
    assert changed("sed -E -i \"s/(foo|bar)/baz/g\" ./lib/x.py") == {"lib/x.py": "edited (sed -i)"}
    assert changed("sed -n 's/x/y/p' lib/x.py") == {}  # no -i: printed, not changed
    assert changed("perl -pi -e 's/foo/bar/' lib/a.pl") == {"lib/a.pl": "edited (perl -i)"}


def test_a_heredoc_carrying_a_whole_file_is_one_write() -> None:
    body = "\n".join([
        '"""Parse dates."""',
        "import re",
        "",
        "def parse_duration(value):",
        "    # a shell would not read any of this: cat > other.py && rm -rf / ; echo $HOME > out",
        '    if value.startswith("EOFX"):',
        "        raise ValueError(\"Error: bad 'duration' > 0\")",
        "    return re.match(r'(?P<days>\\d+) (?:days?, )?', value)",
        *[f"CONSTANT_{n} = {n}  # padding the way a real module is long" for n in range(300)],
    ])
    command = f"cd /testbed && cat > django/utils/dateparse.py << 'EOF'\n{body}\nEOF\npython -c 'import django'"
    assert changed(command) == {"django/utils/dateparse.py": "written (cat > heredoc)"}
    other_order = f"cat <<'EOF' > /testbed/reproduce.py\n{body}\nEOF"
    assert changed(other_order) == {"/testbed/reproduce.py": "written (cat > heredoc)"}


def test_redirections_tee_and_scratch_files() -> None:
    command = ("echo 'DEBUG = True' > settings_local.py && echo x >> notes/Log.txt && echo y > /tmp/scratch.txt "
               "&& python -m pytest -q 2>/dev/null | tee test_output.log && printf 'a' >/dev/null && "
               "cd /tmp && echo z > here.txt")
    output = "<returncode>0</returncode>\n<output>\n2 passed in 0.01s\n</output>"
    assert changed(command, output) == {
        "settings_local.py": "written (echo >)",
        "notes/Log.txt": "appended (echo >>)",
        "test_output.log": "written (tee)",
    }  # nothing under /tmp (nor after `cd /tmp`), nor /dev/null


def test_copies_moves_and_deletions() -> None:
    command = ("cd /testbed && cp django/http/response.py django/http/response.py.backup && "
               "mv django/http/new_response.py django/http/response.py && rm -f reproduce.py /tmp/t.py && "
               "cp a.py b.py backups/")
    assert changed(command) == {
        "django/http/response.py.backup": "copied from django/http/response.py (cp)",
        "django/http/new_response.py": "moved to django/http/response.py (mv)",
        "django/http/response.py": "moved from django/http/new_response.py (mv)",
        "reproduce.py": "deleted (rm)",
        "backups/a.py": "copied from a.py (cp)",
        "backups/b.py": "copied from b.py (cp)",
    }


def test_paths_are_keyed_relative_to_where_the_command_went() -> None:
    assert changed("cd /testbed && sed -i 's/a/b/' /testbed/django/db/models/Query.py") == {
        "django/db/models/Query.py": "edited (sed -i)"}
    assert changed("cd /testbed && cd django && sed -i 's/a/b/' db/x.py") == {"django/db/x.py": "edited (sed -i)"}
    assert changed("cd /srv/app && sed -i 's/a/b/' /etc/app.conf") == {"/etc/app.conf": "edited (sed -i)"}


def test_python_that_writes_a_literal_path() -> None:
    script = ("cd /testbed && python3 - <<'EOF'\nimport re\nfile_path = 'django/core/validators.py'\n"
              "with open(file_path, 'r') as f:\n    content = f.read()\ncontent = content.replace('\\\\Z', '\\\\z')\n"
              "with open(file_path, 'w') as f:\n    f.write(content)\nopen('/tmp/log.txt', 'a').write('done')\n"
              "print('Fixed')\nEOF")
    assert changed(script, "<returncode>0</returncode>\n<output>\nFixed\n</output>") == {
        "django/core/validators.py": "written (python3 - heredoc)"}
    one_liner = ("python -c \"from pathlib import Path; p = 'x'; Path('src/settings.py').write_text('X = 1')\" && "
                 "python -c \"print(open('README.rst').read())\"")
    assert changed(one_liner) == {"src/settings.py": "written (python -c)"}
    named = ("cd /srv/app && python - <<'EOF'\nfrom pathlib import Path\npath = Path(\"tidewater/schedule.py\")\n"
             "text = path.read_text()\npath.write_text(text.replace('a', 'b'))\nnotes = Path('NOTES.md')\n"
             "print(notes.read_text())\nEOF")
    assert changed(named) == {"tidewater/schedule.py": "written (python - heredoc)"}


def test_a_fix_script_written_and_run_in_one_command() -> None:
    command = ("cd /testbed && cat > fix_cstack.py << 'EOF'\nimport re\n"
               "with open('astropy/modeling/separable.py', 'r') as f:\n    content = f.read()\n"
               "new_content = re.sub(r'= 1$', '= right', content)\n"
               "with open('astropy/modeling/separable.py', 'w') as f:\n    f.write(new_content)\n"
               "print(\"Fixed _cstack function\")\nEOF\npython3 fix_cstack.py")
    assert changed(command, "<returncode>0</returncode>\n<output>\nFixed _cstack function\n</output>") == {
        "fix_cstack.py": "written (cat > heredoc)",
        "astropy/modeling/separable.py": "written (python3 fix_cstack.py)",
    }


def test_patches_name_their_files() -> None:
    diff = ("diff --git a/django/db/models/query.py b/django/db/models/query.py\n"
            "--- a/django/db/models/query.py\n+++ b/django/db/models/query.py\n@@ -7 +7 @@ class QuerySet:\n"
            "--- a removed line that starts with two dashes\n+++ an added line\n"
            "--- /dev/null\n+++ b/docs/New.rst\n@@ -0,0 +1 @@\n+hello\n"
            "--- a/old_module.py\n+++ /dev/null\n")
    assert changed(f"cd /testbed && git apply - <<'EOF'\n{diff}EOF") == {
        "django/db/models/query.py": "edited (git apply)",
        "docs/New.rst": "created (git apply)",
        "old_module.py": "deleted (git apply)",
    }
    assert changed(f"git apply --check <<'EOF'\n{diff}EOF") == {}
    assert changed(f"patch -p1 <<'EOF'\n{diff}EOF") == {  # patch -s prints nothing: the patch's own names count
        "django/db/models/query.py": "edited (patch -p1)", "docs/New.rst": "created (patch -p1)",
        "old_module.py": "deleted (patch -p1)"}
    reported = "<returncode>0</returncode>\n<output>\npatching file django/db/models/sql/compiler.py\n</output>"
    assert changed("cd /testbed && patch -p1 < fix.patch", reported) == {
        "django/db/models/sql/compiler.py": "patched (patch -p1)"}


def test_a_patch_that_failed_in_part_still_changed_its_file() -> None:
    output = ("<returncode>1</returncode>\n<output>\npatching file django/db/backends/base/schema.py\n"
              "Hunk #1 FAILED at 1.\nHunk #2 succeeded at 519 (offset 2 lines).\n"
              "1 out of 2 hunks FAILED -- saving rejects to file django/db/backends/base/schema.py.rej\n"
              "patching file django/db/migrations/operations/models.py\nHunk #1 FAILED at 560.\n"
              "1 out of 1 hunk FAILED -- saving rejects to file django/db/migrations/operations/models.py.rej\n"
              "</output>")
    assert changed("cd /testbed && sed -i 's/a/b/' x.py && patch -p1 < final_fix.patch", output) == {
        "django/db/backends/base/schema.py": "patched in part (patch -p1; some hunks FAILED)"}


def test_git_restores_and_removals() -> None:
    assert changed("git checkout -- django/forms/Fields.py && git rm -q old.py && git restore --staged x.py") == {
        "django/forms/Fields.py": "restored (git checkout)", "old.py": "deleted (git rm)"}
    assert changed("git checkout main && git stash") == {}  # a branch; a stash names no file


def test_a_failed_command_changes_nothing() -> None:
    edit = "cd /testbed && sed -i 's/a/b/' django/x.py && python reproduce.py"
    assert changed(edit, "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
                         "  File \"reproduce.py\", line 3, in <module>\nValueError: still broken\n</output>") == {}
    piped = "sed -i 's/a/b/' django/missing.py 2>&1 | tail -3"
    assert changed(piped, "<returncode>0</returncode>\n<output>\n"
                          "sed: can't read django/missing.py: No such file or directory\n</output>") == {}


def test_a_script_that_crashes_after_the_shell_wrote_it_was_written_all_the_same() -> None:
    """At exit status 0 a traceback is the script's failure, not the shell's: the heredoc wrote debug_issue.py
    (mini-swe-agent writes and runs a probe in one call); what a crashed Python program would have written is
    not counted."""
    crashed = "<returncode>0</returncode>\n<output>\nTraceback (most recent call last):\n" \
              "  File \"/testbed/debug_issue.py\", line 1\nNameError: name 'x' is not defined\n</output>"
    caught = "cd /testbed && cat > debug_issue.py <<'EOF'\nx\nEOF\npython debug_issue.py | head -5"
    assert changed(caught, crashed) == {"debug_issue.py": "written (cat > heredoc)"}
    fixer = "cat > fix.py <<'EOF'\nopen('src/a.py', 'w').write('x')\nEOF\npython fix.py"
    assert changed(fixer, crashed) == {"fix.py": "written (cat > heredoc)"}  # not src/a.py: fix.py crashed
    assert changed("python - <<'EOF'\nopen('src/a.py', 'w').write('x')\nEOF", crashed) == {}
    assert changed(caught, crashed.replace(">0<", ">1<")) == {}  # a non-zero exit status: nothing counts


def test_a_script_written_in_one_call_changes_its_files_when_a_later_call_runs_it() -> None:
    from proxy.extract.changes import changed_files
    from proxy.records import RAN, SCRIPT
    from proxy.state import TaskState

    fix = ("cat > /tmp/fix_lookups.py << 'EOF'\nwith open('/testbed/django/db/models/lookups.py') as f:\n"
           "    text = f.read()\nwith open('/testbed/django/db/models/lookups.py', 'w') as f:\n"
           "    f.write(text.replace('clear_select_clause()', 'clear_select_clause(keep=True)'))\nEOF")
    steps = [(fix, OK), ("cd /testbed && sed -i 's/a/b/' django/db/models/lookups.py", OK),
             ("cd /testbed && python /tmp/fix_lookups.py", "<returncode>0</returncode>\n<output>\nFixed\n</output>"),
             ("cat > /tmp/unused.py <<'EOF'\nopen('setup.py', 'w').write('')\nEOF", OK)]
    state = TaskState()
    for index, (command, output) in enumerate(steps):
        tool_call = call("bash", command=command)
        message = {"role": "tool", "tool_call_id": tool_call.id, "content": output}
        state.apply(extract(message, MessageContext(index=2 * index + 3, ref=f"t{2 * index + 3}", call=tool_call)))
    scripts = {fact.key: fact for fact in state.of_kind(SCRIPT)}
    changes = changed_files(state.of_kind(CHANGED), scripts, state.of_kind(RAN))
    assert [(f.key, f.value, f.evidence_ref) for f in changes] == [
        # the absolute path the script writes is the relative one the sed named: one file, its latest change
        ("django/db/models/lookups.py", "written (python /tmp/fix_lookups.py)", "t7")]  # setup.py: never run


# ---- text agents ----------------------------------------------------------------------------------------------


def test_a_text_agents_command_block_and_its_observation() -> None:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "<pr_description>Fix the timezone offset check.</pr_description>"},
        {"role": "assistant", "content": "THOUGHT: The bound is off by one; edit it in place.\n\n```bash\n"
                                         "sed -i 's/offset > 14/offset >= 14/' src/tz/Offsets.py && "
                                         "grep -n 'offset >=' src/tz/Offsets.py\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n41:    if offset >= 14:\n</output>"},
    ]
    extracted = extract_at(messages, 3, "ev3", 1, observed=True)
    assert {f.key: f.value for f in extracted.extraction.facts if f.kind == CHANGED} == {
        "src/tz/Offsets.py": "edited (sed -i)"}


# ---- editor tools and apply_patch -----------------------------------------------------------------------------


def test_claude_code_editors() -> None:
    assert changed(call("Write", file_path="/repo/src/App.tsx", content="export {}"),
                   "File created successfully at: /repo/src/App.tsx") == {"/repo/src/App.tsx": "written (Write)"}
    assert changed(call("Edit", file_path="/repo/src/app.py", old_string="a", new_string="b"),
                   "The file /repo/src/app.py has been updated. Here's the result of running `cat -n`:\n"
                   "    12\t        raise ValueError('Error: bad')") == {"/repo/src/app.py": "edited (Edit)"}
    assert changed(call("MultiEdit", file_path="lib/x.py", edits=[{"old_string": "a", "new_string": "b"}] * 3),
                   "Applied 3 edits to lib/x.py") == {"lib/x.py": "edited (MultiEdit, 3 edits)"}
    assert changed(call("NotebookEdit", notebook_path="nb/Analysis.ipynb", new_source="x", edit_mode="delete"),
                   "Deleted cell") == {"nb/Analysis.ipynb": "cell deleted (NotebookEdit)"}
    assert changed(call("Edit", file_path="src/app.py", old_string="zzz", new_string="b"),
                   "<tool_use_error>String to replace not found in file.\nString: zzz</tool_use_error>") == {}
    assert changed(call("Read", file_path="src/app.py"), "     1\timport os") == {}


def test_str_replace_editors_and_file_tools() -> None:
    editor = "str_replace_based_edit_tool"
    assert changed(call(editor, command="create", path="/testbed/reproduce.py", file_text="print(1)"),
                   "File created successfully at: /testbed/reproduce.py") == {
        "/testbed/reproduce.py": "created (create)"}
    assert changed(call("str_replace_editor", command="insert", path="src/a.py", insert_line=10, new_str="x"),
                   "The file src/a.py has been edited.") == {"src/a.py": "edited (insert at line 10)"}
    assert changed(call(editor, command="str_replace", path="src/a.py", old_str="q", new_str="r"),
                   "No replacement was performed, old_str `q` did not appear verbatim in src/a.py.") == {}
    assert changed(call(editor, command="view", path="src/a.py"), "1\timport os") == {}
    assert changed(call("write_file", path="docs/Guide.md", content="# Guide"), "Successfully wrote") == {
        "docs/Guide.md": "written (write_file)"}
    assert changed(call("edit_file", path="docs/Guide.md", edits=[], dryRun=True), "```diff\n```") == {}


CODEX_PATCH = ("*** Begin Patch\n*** Update File: src/Parser.rs\n@@ fn parse\n-    old\n+    new\n"
               "*** Add File: src/lexer.rs\n+pub fn lex() {}\n*** Delete File: src/old.rs\n*** End Patch")


def test_codex_apply_patch_tool_and_shell_forms() -> None:
    expected = {"src/Parser.rs": "edited (apply_patch)", "src/lexer.rs": "created (apply_patch)",
                "src/old.rs": "deleted (apply_patch)"}
    done = "Success. Updated the following files:\nM src/Parser.rs\nA src/lexer.rs\nD src/old.rs"
    assert changed(call("apply_patch", input=CODEX_PATCH), done) == expected
    assert changed(ToolCall(id="call_1", name="apply_patch", arguments=CODEX_PATCH), done) == expected  # freeform
    heredoc = call("shell", command=["bash", "-lc", f"apply_patch <<'EOF'\n{CODEX_PATCH}\nEOF"])
    assert changed(heredoc, "Exit code: 0\nOutput:\n" + done) == expected
    assert changed(call("shell", command=["apply_patch", CODEX_PATCH]), done) == expected
    assert changed(call("apply_patch", input=CODEX_PATCH), "Invalid patch: missing *** End Patch") == {}


def test_argv_commands_are_read_as_the_shell_would_run_them() -> None:
    assert shell_script(["bash", "-lc", "sed -i 's/a/b/' x.py"]) == "sed -i 's/a/b/' x.py"
    assert shell_script(["sed", "-i", "s/a b/c/", "x.py"]) == "sed -i 's/a b/c/' x.py"
    assert changed(call("shell", command=["sed", "-i", "s/a b/c/", "my dir/x.py"]),
                   "Exit code: 0") == {"my dir/x.py": "edited (sed -i)"}


# ---- hostile input ------------------------------------------------------------------------------------------

LIMIT_SECONDS = 2.0
SHAPES = {  # each hostile text where a shape's parser reads most: a file name, a quoted script, a heredoc body
    "sed": lambda text: f"sed -i 's/{text}/x/' {text}",
    "heredoc": lambda text: f"cat > fix.py << 'EOF'\n{text}\nEOF\npython fix.py",
    "python -c": lambda text: f'python -c "{text}"',
    "patch": lambda text: f"git apply <<'EOF'\n--- a/{text}\n+++ b/{text}\n{text}\nEOF",
    "bare": lambda text: text,
}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_hostile_commands_are_read_in_bounded_time(shape: str) -> None:
    for name, text in adversarial_texts(100_000).items():
        tool_call = call("bash", command=SHAPES[shape](text))
        start = time.perf_counter()
        facts = file_changes(tool_call, "<returncode>0</returncode>\n" + text[:20_000], "ok")
        elapsed = time.perf_counter() - start
        assert elapsed <= LIMIT_SECONDS, f"{shape} on {name!r}: {elapsed:.2f} s"
        assert len(facts) <= 200, f"{shape} on {name!r}: {len(facts)} facts"
