"""Where runs are kept: the store interface the engine talks to (`base`), and the store over
Django's database (`django`), on SQLite and PostgreSQL."""
