from agemem.cli import main

raise SystemExit(main())
