"""Existing rojos left on the default tools get update_plan, the new default; a rojo whose
administrator chose its tools keeps that choice (its admin page offers the new tool)."""

from django.db import migrations

# The built-in tools a new rojo got before update_plan (read_result is never in the list).
_EARLIER_DEFAULT = {
    "read_path_meta",
    "get_text_content",
    "write_text_content",
    "list_files",
    "create_directory",
    "edit_text_content",
    "move_path",
    "search_text",
}


def _add(apps, schema_editor):
    Rojo = apps.get_model("rojos", "Rojo")
    for rojo in Rojo.objects.only("pk", "tools"):
        if set(rojo.tools or ()) == _EARLIER_DEFAULT:
            Rojo.objects.filter(pk=rojo.pk).update(tools=[*rojo.tools, "update_plan"])


def _remove(apps, schema_editor):
    Rojo = apps.get_model("rojos", "Rojo")
    for rojo in Rojo.objects.only("pk", "tools"):
        if "update_plan" in (rojo.tools or ()):
            kept = [name for name in rojo.tools if name != "update_plan"]
            Rojo.objects.filter(pk=rojo.pk).update(tools=kept)


class Migration(migrations.Migration):
    dependencies = [
        ("rojos", "0028_model_per_conversation"),
    ]

    operations = [migrations.RunPython(_add, _remove)]
