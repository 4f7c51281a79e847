"""Management commands of ``anarchon.contrib.django``."""
