from django.apps import AppConfig


class RojectConfig(AppConfig):
    name = "roject"
    verbose_name = "Projects"
