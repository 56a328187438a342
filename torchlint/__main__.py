"""`python -m torchlint`."""

from torchlint.doors.cli import main

if __name__ == "__main__":
    main(prog_name="torchlint")
