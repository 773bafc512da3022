from nmtkit.cli import app

app(prog_name="nmtkit")
