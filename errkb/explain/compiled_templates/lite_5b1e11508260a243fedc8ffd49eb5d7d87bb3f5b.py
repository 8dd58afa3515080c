from errkb.explain.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = '_explain_record.txt.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_v = resolve('v')
    l_0_va = resolve('va')
    l_0_r = missing
    try:
        t_1 = environment.filters['code']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'code' found.")
    try:
        t_2 = environment.filters['format']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'format' found.")
    try:
        t_3 = environment.filters['style']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'style' found.")
    try:
        t_4 = environment.filters['wrap']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'wrap' found.")
    pass
    l_0_r = environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'r')
    context.vars['r'] = l_0_r
    context.exported_vars.add('r')
    yield str(environment.finalize(t_3(t_4(str_join(((environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'error_class') or 'Error'), '  ', environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'slug'), )), 0, 2), 'title')))
    yield '\n'
    if environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'variant'):
        pass
        l_0_va = environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'variant')
        context.vars['va'] = l_0_va
        context.exported_vars.add('va')
        yield str(environment.finalize(t_4(t_2('%s wording (%s %s) of %s', (environment.getattr((undefined(name='va') if l_0_va is missing else l_0_va), 'relation') or 'other'), environment.getattr((undefined(name='va') if l_0_va is missing else l_0_va), 'project'), (environment.getattr((undefined(name='va') if l_0_va is missing else l_0_va), 'first') if (environment.getattr((undefined(name='va') if l_0_va is missing else l_0_va), 'first') == environment.getattr((undefined(name='va') if l_0_va is missing else l_0_va), 'last')) else str_join((environment.getattr((undefined(name='va') if l_0_va is missing else l_0_va), 'first'), '–', environment.getattr((undefined(name='va') if l_0_va is missing else l_0_va), 'last'), ))), environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'slug')), 2)))
        yield '\n'
    yield str(environment.finalize(t_3(t_4(str_join((environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'repo'), t_2('  score %.2f  id %s', environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'score'), environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'record_id')), ('  (bounded regex path)' if environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'bounded') else ''), )), 2), 'dim')))
    yield '\n'
    if environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'occurrences'):
        pass
        yield str(environment.finalize(t_4(t_2('seen %d time%s, lines %d-%d', environment.getattr(environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'occurrences'), 'count'), ('' if (environment.getattr(environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'occurrences'), 'count') == 1) else 's'), environment.getattr(environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'occurrences'), 'first_line'), environment.getattr(environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'occurrences'), 'last_line')), 2)))
        yield '\n'
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'f'), 'message'), 2)))
    yield '\n'
    yield str(environment.finalize(t_3(t_4(environment.getattr(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'proof'), 'line'), 2), 'dim')))
    yield '\n'
    if environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'draft'):
        pass
        yield '\n  Draft record: mined from the source, not yet curated; only the raise site is\n  known.\n'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'documentation'):
        pass
        yield '\nWhat it is\n'
        yield str(environment.finalize(t_4(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'documentation'), 2)))
        yield '\n'
    if environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'where'):
        pass
        yield '\nWhere it is raised\n'
        yield str(environment.finalize(t_4(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'where'), 2)))
        yield '\n'
        if environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'line_url'):
            pass
            yield str(environment.finalize(t_3(t_4(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'line_url'), 2), 'link')))
            yield '\n'
    if (environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'triggerScenarios') or environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'commonSituations')):
        pass
        yield '\nWhy it happens\n'
        if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'triggerScenarios'):
            pass
            yield str(environment.finalize(t_4(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'triggerScenarios'), 2)))
            yield '\n'
        if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'commonSituations'):
            pass
            yield str(environment.finalize(t_4(str_join(('Common situations: ', environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'commonSituations'), )), 2)))
            yield '\n'
    if environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'solutions'):
        pass
        yield '\nHow to fix\n'
        l_1_loop = missing
        for l_1_s, l_1_loop in LoopContext(environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'solutions'), undefined):
            _loop_vars = {}
            pass
            yield str(environment.finalize(t_4(str_join((t_2('%d. ', environment.getattr(l_1_loop, 'index')), l_1_s, )), 2, 5)))
            yield '\n'
        l_1_loop = l_1_s = missing
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'exampleFix'):
        pass
        yield '\nExample fix\n'
        yield str(environment.finalize(t_3(t_1(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'exampleFix'), 4), 'code')))
        yield '\n'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'validationCode'):
        pass
        yield '\nValidate the fix\n'
        yield str(environment.finalize(t_3(t_1(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'validationCode'), 4), 'code')))
        yield '\n'
    if environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'tips'):
        pass
        yield '\nPrevention\n'
        for l_1_t in environment.getattr((undefined(name='v') if l_0_v is missing else l_0_v), 'tips'):
            _loop_vars = {}
            pass
            yield str(environment.finalize(t_4(str_join(('- ', l_1_t, )), 2, 4)))
            yield '\n'
        l_1_t = missing

blocks = {}
debug_info = '2=38&3=41&4=43&5=45&6=48&8=50&9=52&10=54&12=56&13=58&14=60&18=63&21=66&23=68&26=71&27=73&28=75&31=77&34=80&35=82&37=84&38=86&41=88&44=92&45=95&48=98&51=101&53=103&56=106&58=108&61=111&62=114'