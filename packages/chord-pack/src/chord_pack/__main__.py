from chord_pack.cli import app

app(prog_name="chord-pack")
