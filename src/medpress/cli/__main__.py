from medpress.cli import app

app()
