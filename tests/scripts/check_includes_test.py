"""scripts/check_includes.py on small made-up trees: what it accepts and what it refuses."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check_includes.py")


def run(files):
    """Exit status and output of the script over a tree of {path: text}."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        r = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)
        return r.returncode, r.stdout


class CheckIncludes(unittest.TestCase):
    def test_downward_includes_pass(self):
        rc, out = run({"src/support/a.h": "", "src/ir/b.h": '#include "support/a.h"\n',
                       "src/runtime/cpu/c.cpp": '#include "ir/b.h"\n#include "c.h"\n',
                       "src/runtime/cpu/c.h": '#include "metile/metile.h"\n',
                       "include/metile/metile.h": "", "capi/d.cpp": '#include "runtime/cpu/c.h"\n'})
        self.assertEqual((rc, out), (0, ""))

    def test_upward_include_is_named_with_its_line(self):
        rc, out = run({"src/codegen/msl.h": "", "src/ir/a.h": '// why\n#include "codegen/msl.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn('src/ir/a.h:2: #include "codegen/msl.h": ir (rank 1) includes a higher layer, codegen', out)

    def test_sibling_devices_and_cache_may_not_meet(self):
        rc, out = run({"src/runtime/cpu/t.h": "", "src/runtime/metal/m.cpp": '#include "runtime/cpu/t.h"\n',
                       "src/cache/c.cpp": '#include "runtime/cpu/t.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("runtime/metal (rank 8) includes a sibling, runtime/cpu", out)
        self.assertIn("cache (rank 8) includes a sibling, runtime/cpu", out)

    def test_runtime_core_is_below_the_devices(self):
        rc, out = run({"src/runtime/cpu/t.h": "", "src/runtime/device.h": '#include "runtime/cpu/t.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("runtime (rank 7) includes a higher layer, runtime/cpu", out)

    def test_layout_assignment_may_not_include_lowering(self):
        # Lowering reads layout assignment's result; the way back is the cycle issue 31 ended.
        rc, out = run({"src/passes/lower_options.h": "",
                       "src/passes/assign_layouts.h": '#include "passes/lower_options.h"\n',
                       "src/passes/assign_layouts.cpp": '#include "passes/assign_layouts.h"\n'
                                                        '#include "passes/lower_internal.h"\n',
                       "src/passes/lower.h": '#include "passes/lower_options.h"\n',
                       "src/passes/lower_internal.h": '#include "passes/assign_layouts.h"\n#include "passes/lower.h"\n',
                       "src/passes/lower_dot.cpp": '#include "passes/lower_internal.h"\n',
                       "src/passes/pipeline.cpp": '#include "passes/assign_layouts.h"\n#include "passes/lower.h"\n'})
        self.assertEqual(rc, 1)
        self.assertEqual(out.splitlines(), [
            'src/passes/assign_layouts.cpp:2: #include "passes/lower_internal.h": passes (rank 3) '
            'includes a higher layer, lowering (rank 4)'])

    def test_lowering_may_not_include_the_pipeline(self):
        rc, out = run({"src/passes/pipeline.h": "", "src/passes/lower.cpp": '#include "passes/pipeline.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("lowering (rank 4) includes a higher layer, gpu_pipeline (rank 5)", out)

    def test_the_shared_emitter_may_not_include_a_dialect(self):
        rc, out = run({"src/codegen/cuda/wgmma.h": "", "src/codegen/gpu_emit.cpp": '#include "codegen/cuda/wgmma.h"\n',
                       "src/codegen/cuda/cuda.cpp": '#include "codegen/gpu_emit.h"\n', "src/codegen/gpu_emit.h": ""})
        self.assertEqual(rc, 1)
        self.assertEqual(out.splitlines(), ['src/codegen/gpu_emit.cpp:1: #include "codegen/cuda/wgmma.h": codegen '
                                            '(rank 5) includes a higher layer, codegen/cuda (rank 6)'])

    def test_dialects_may_not_include_each_other(self):
        rc, out = run({"src/codegen/metal/msl.h": "", "src/codegen/cuda/cuda.cpp": '#include "codegen/metal/msl.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("codegen/cuda (rank 6) includes a sibling, codegen/metal", out)

    def test_missing_header_is_refused(self):
        rc, out = run({"src/ir/a.h": '#include "ir/nowhere.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("no such file", out)


ROOT = os.path.join(os.path.dirname(SCRIPT), "..")


class ArchitectureDoc(unittest.TestCase):
    """docs/ARCHITECTURE.md states what the code holds: the layers, every pass, the checklist."""

    def setUp(self):
        with open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")) as f:
            self.doc = f.read()

    def test_the_layer_table_is_the_checkers(self):
        sys.path.insert(0, os.path.dirname(SCRIPT))
        import check_includes
        doc = {}
        for line in self.doc.split("## What may include what")[1].split("\n## ")[0].splitlines():
            cells = line.split("|")
            if len(cells) > 3 and cells[1].strip().isdigit():
                for name in cells[2].split(","):
                    doc[name.strip().split("`")[1]] = int(cells[1])
        self.assertEqual(doc, {name: rank for rank, name, _ in check_includes.LAYERS})

    def test_every_pass_is_named(self):
        import re
        for table, pattern in (("src/passes/tile/tile_passes.def", r'^TILE_PASS\("([^"]+)"'),
                               ("src/passes/passes.def", r'^PASS\("([^"]+)"')):
            with open(os.path.join(ROOT, table)) as f:
                names = re.findall(pattern, f.read(), re.M)
            self.assertTrue(names, table)
            for n in names:
                self.assertIn(f"`{n}`", self.doc, f"{n} ({table}) is not in docs/ARCHITECTURE.md")

    def test_checklist_and_devices(self):
        self.assertIn("## Checklist: add an op", self.doc)
        for device in ("interp", "cpu", "cuda", "metal", "metal-sim"):
            self.assertIn(f"`{device}`", self.doc)


if __name__ == "__main__":
    unittest.main()
