from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rojos", "0015_conversation_branches"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="turn_owner",
            field=models.CharField(blank=True, editable=False, max_length=200),
        ),
    ]
