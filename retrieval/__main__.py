from retrieval.cli import main

raise SystemExit(main())
