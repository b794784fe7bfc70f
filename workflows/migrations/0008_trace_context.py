"""Where a run and a message came from in a distributed trace: the W3C trace context (traceparent,
tracestate) of the request that started the run or sent the message. Nullable: NULL whenever no
OpenTelemetry SDK was configured, so the columns cost nothing when tracing is off."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0012_limiters"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="trace_context",
            field=models.JSONField(
                blank=True,
                help_text="W3C trace context of the request that started the run (tracing on).",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="trace_context",
            field=models.JSONField(
                blank=True, help_text="W3C trace context of the sender (tracing on).", null=True
            ),
        ),
    ]
