from anonymizer.cli import app

app(prog_name="anonymizer")
