from chartgw.cli import main

raise SystemExit(main())
