import sys

from nodemanager.cli import main

sys.exit(main())
