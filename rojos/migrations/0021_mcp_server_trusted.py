"""MCP servers get `trusted`: an admin's word that the server's tool annotations hold.

Existing servers start untrusted, as new ones do: a tool's readOnlyHint no longer spares it
approval, nor offers it to viewers, until an admin marks its server trusted.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rojos", "0020_message_draft"),
    ]

    operations = [
        migrations.AddField(
            model_name="mcpserver",
            name="trusted",
            field=models.BooleanField(
                default=False,
                help_text="Trust this server's tool annotations: its tools marked readOnlyHint "
                "run without approval and are offered to viewers. Untrusted (the default), "
                "every tool of the server counts as one that writes: offered only to editors "
                "and owners, and asking for approval under the rojo's rules.",
            ),
        ),
    ]
