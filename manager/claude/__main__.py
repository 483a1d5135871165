from __future__ import annotations

from manager.claude.entry import main

raise SystemExit(main())
