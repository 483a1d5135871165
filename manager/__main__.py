from __future__ import annotations

from manager.main import main

raise SystemExit(main())
