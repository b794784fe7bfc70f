"""Where runs are kept: the store interface the engine talks to (`base`), an in-memory store for
fast tests (`memory`), and the real one over Django's database (`django`)."""
