from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rojos", "0026_rojo_reasoning"),
    ]

    operations = [
        migrations.AddField(
            model_name="rojo",
            name="capability_profiles",
            field=models.JSONField(
                blank=True,
                default=dict,
                editable=False,
                help_text="What the provider self-test found each model does, by model name (rojos.selftest; read through rojos.models.capabilities).",
            ),
        ),
    ]
