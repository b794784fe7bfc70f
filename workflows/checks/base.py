"""What every check of the workflows app shares: its tag and where its hints send people."""

TAG = "workflows"
DOCS = "See 'Add it to your project' in the README of django-durable-workflows."
