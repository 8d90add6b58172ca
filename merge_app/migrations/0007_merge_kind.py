from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("merge_app", "0006_virtual_base")]

    operations = [
        migrations.AddField(
            model_name="merge",
            name="kind",
            field=models.CharField(
                choices=[("merge", "Merge"), ("revert", "Revert"), ("cherry_pick", "Cherry Pick")],
                default="merge",
                max_length=16,
            ),
        ),
    ]
