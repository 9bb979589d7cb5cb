from django.apps import AppConfig


class RojosConfig(AppConfig):
    name = "rojos"
    verbose_name = "Rojos and conversations"
