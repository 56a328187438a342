"""`python -m torchlint.verify [OPTIONS]` is `torchlint verify`, and
`python -m torchlint.verify doctor` is `torchlint doctor`.

This entry point imports only click, the standard library and
torchlint.verify (torch in the commands' subprocesses and probes): it runs
where the linter's own dependencies (LibCST, pathspec) are not installed,
such as a GPU machine with only torch, from a plain checkout."""

import sys

from torchlint.verify.cli import doctor_command, verify_command


def main(argv=None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "doctor":
        doctor_command.main(args[1:], prog_name="python -m torchlint.verify doctor")
    if args and args[0] == "verify":
        args = args[1:]
    verify_command.main(args, prog_name="python -m torchlint.verify")


if __name__ == "__main__":
    main()
