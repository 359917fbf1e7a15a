from udo_build.cli import run

run()
