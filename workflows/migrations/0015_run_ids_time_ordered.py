"""Run ids are made time-ordered (`workflows.core.ids.new_run_id`, UUID version 7) instead of
uuid4. The default is applied in Python, so the database has nothing to change: the operation
updates Django's model state only (on SQLite, a plain AlterField would copy the whole run table to
change nothing). Existing runs keep their ids."""

import workflows.core.ids
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0014_concurrency_group_due"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="id",
                    field=models.UUIDField(
                        default=workflows.core.ids.new_run_id, editable=False, primary_key=True, serialize=False
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
