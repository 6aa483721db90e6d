"""``python -m agemem.tasks.pddl generate [--out DIR]``: write the bundled problems again."""

import sys

from agemem.tasks.pddl.generator import main

sys.exit(main())
