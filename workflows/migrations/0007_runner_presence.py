from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0010_schedules"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunnerPresence",
            fields=[
                (
                    "owner",
                    models.CharField(
                        help_text="The lease owner id of its runs.",
                        max_length=100,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("host", models.CharField(max_length=255)),
                ("pid", models.IntegerField()),
                (
                    "machine",
                    models.CharField(
                        blank=True,
                        help_text="Kernel boot id and PID namespace: where the pid is valid.",
                        max_length=200,
                    ),
                ),
                (
                    "process_start",
                    models.CharField(
                        blank=True,
                        help_text="The process's start time as the kernel counts it.",
                        max_length=64,
                    ),
                ),
                ("started_at", models.DateTimeField()),
                ("last_seen", models.DateTimeField()),
                ("lease_seconds", models.FloatField()),
                ("concurrency", models.PositiveIntegerField()),
                (
                    "workflows",
                    models.JSONField(default=dict, help_text="Workflow name -> the versions it knows."),
                ),
            ],
            options={
                "ordering": ["started_at", "owner"],
            },
        ),
    ]
