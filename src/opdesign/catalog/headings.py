"""Chapter and sub-chapter headings of DESIGN.md (CANNBot contract, domain.md §9), per language.

Shared by the renderer and the validator; imports nothing heavy.
"""

#: The language ``opdesign new`` and the ``new_design`` tool write by default. Only the Chinese
#: headings pass the CANNBot contract: its validator (pypto-op-design ``scripts/validate_artifacts.py``)
#: compares each whole heading text with the ``required_headings`` of ``references/artifacts.yaml``,
#: which are Chinese (``验证方案 / Verification Plan`` included). ``en`` stays available for readers.
DEFAULT_LANG = "zh"

# Chapter headings of the CANNBot contract (domain.md §9), per language.
HEADINGS: dict[str, dict[str, str]] = {
    "en": {
        "contract": "Operator Contract",
        "graph": "Compute Graph and API Mapping",
        "decomposition": "Decomposition and Module Boundaries",
        "decisions": "Patterns and Design Decisions",
        "pseudocode": "Pseudocode",
        "verification": "Verification Plan",
        "risks": "Risks and Open Questions",
    },
    "zh": {
        "contract": "算子契约",
        "graph": "计算图与 API 映射",
        "decomposition": "分解与模块边界",
        "decisions": "范式与设计决策",
        "pseudocode": "伪代码",
        "verification": "验证方案 / Verification Plan",
        "risks": "风险与开放问题",
    },
}
SUBHEADINGS: dict[str, dict[str, str]] = {
    "en": {
        "selection": "SK/AT Selection", "tiling": "Tiling and Data Split", "config": "Implementation Config",
        "layout": "Layout and Quantization", "loops": "Loops and State", "stability": "Numerical Stability",
        "checks": "Design Checks", "cases": "Post-Implementation Cases",
    },
    "zh": {
        "selection": "SK/AT 选择", "tiling": "Tiling 与数据切分", "config": "实现配置",
        "layout": "布局与量化", "loops": "循环与状态", "stability": "数值稳定性",
        "checks": "设计检查结果", "cases": "实现后验证用例",
    },
}
