import sys

from dbmatrix.cli import main

sys.exit(main())
