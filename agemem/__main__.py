from agemem.entrypoints.cli import main

raise SystemExit(main())
