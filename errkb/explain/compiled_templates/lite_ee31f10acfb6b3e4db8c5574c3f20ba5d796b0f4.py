from errkb.explain.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'explain.txt.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_explanation = resolve('explanation')
    l_0_shown = resolve('shown')
    l_0_listed = resolve('listed')
    l_0_others = resolve('others')
    l_0_near = resolve('near')
    l_0_e = missing
    try:
        t_1 = environment.filters['format']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'format' found.")
    try:
        t_2 = environment.filters['length']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'length' found.")
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
    l_0_e = (undefined(name='explanation') if l_0_explanation is missing else l_0_explanation)
    context.vars['e'] = l_0_e
    context.exported_vars.add('e')
    if ((environment.getattr((undefined(name='e') if l_0_e is missing else l_0_e), 'mode') == 'log') and (undefined(name='shown') if l_0_shown is missing else l_0_shown)):
        pass
        yield str(environment.finalize(t_3(t_1('%d known error%s in %d line%s', t_2((undefined(name='listed') if l_0_listed is missing else l_0_listed)), ('' if (t_2((undefined(name='listed') if l_0_listed is missing else l_0_listed)) == 1) else 's'), environment.getattr((undefined(name='e') if l_0_e is missing else l_0_e), 'lines'), ('' if (environment.getattr((undefined(name='e') if l_0_e is missing else l_0_e), 'lines') == 1) else 's')), 'heading')))
        yield '\n'
        for l_1_v in (undefined(name='listed') if l_0_listed is missing else l_0_listed):
            _loop_vars = {}
            pass
            yield str(environment.finalize(t_4(t_1('%6d x  lines %d-%d  %s  %s', environment.getattr(environment.getattr(environment.getattr(l_1_v, 'f'), 'occurrences'), 'count'), environment.getattr(environment.getattr(environment.getattr(l_1_v, 'f'), 'occurrences'), 'first_line'), environment.getattr(environment.getattr(environment.getattr(l_1_v, 'f'), 'occurrences'), 'last_line'), (environment.getattr(environment.getattr(l_1_v, 'f'), 'error_class') or 'Error'), environment.getattr(environment.getattr(l_1_v, 'f'), 'slug')), 0, 12)))
            yield '\n'
        l_1_v = missing
        l_1_loop = missing
        for l_1_v, l_1_loop in LoopContext((undefined(name='shown') if l_0_shown is missing else l_0_shown), undefined):
            l_1_width = resolve('width')
            _loop_vars = {}
            pass
            yield '\n'
            yield str(environment.finalize(t_3(context.call(environment.getattr(t_1('-- %d/%d ', environment.getattr(l_1_loop, 'index'), t_2((undefined(name='listed') if l_0_listed is missing else l_0_listed))), 'ljust'), (undefined(name='width') if l_1_width is missing else l_1_width), '-', _loop_vars=_loop_vars), 'dim')))
            yield '\n'
            template = environment.get_template('_explain_record.txt.j2', 'explain.txt.j2')
            gen = template.root_render_func(template.new_context(context.get_all(), True, {'loop': l_1_loop, 'v': l_1_v, 'e': l_0_e}))
            try:
                for event in gen:
                    yield event
            finally: gen.close()
        l_1_loop = l_1_v = l_1_width = missing
        if (undefined(name='others') if l_0_others is missing else l_0_others):
            pass
            yield '\n'
            yield str(environment.finalize(t_3(t_4(t_1('%d more known error%s listed above; `errkb explain --all` explains every one, `errkb show ID` one record.', (undefined(name='others') if l_0_others is missing else l_0_others), ('' if ((undefined(name='others') if l_0_others is missing else l_0_others) == 1) else 's')), 0), 'dim')))
            yield '\n'
        if (undefined(name='near') if l_0_near is missing else l_0_near):
            pass
            yield '\nAlso in this log, similar to known errors but not exact (the message may have\nchanged between versions):\n'
            template = environment.get_template('_explain_near.txt.j2', 'explain.txt.j2')
            gen = template.root_render_func(template.new_context(context.get_all(), True, {'e': l_0_e}))
            try:
                for event in gen:
                    yield event
            finally: gen.close()
    elif (undefined(name='shown') if l_0_shown is missing else l_0_shown):
        pass
        l_1_loop = missing
        for l_1_v, l_1_loop in LoopContext((undefined(name='shown') if l_0_shown is missing else l_0_shown), undefined):
            l_1_width = resolve('width')
            _loop_vars = {}
            pass
            if (not environment.getattr(l_1_loop, 'first')):
                pass
                yield '\n'
                yield str(environment.finalize(t_3(context.call(environment.getattr(t_1('-- match %d/%d ', environment.getattr(l_1_loop, 'index'), t_2((undefined(name='shown') if l_0_shown is missing else l_0_shown))), 'ljust'), (undefined(name='width') if l_1_width is missing else l_1_width), '-', _loop_vars=_loop_vars), 'dim')))
                yield '\n'
            template = environment.get_template('_explain_record.txt.j2', 'explain.txt.j2')
            gen = template.root_render_func(template.new_context(context.get_all(), True, {'loop': l_1_loop, 'v': l_1_v, 'e': l_0_e}))
            try:
                for event in gen:
                    yield event
            finally: gen.close()
        l_1_loop = l_1_v = l_1_width = missing
        if (undefined(name='others') if l_0_others is missing else l_0_others):
            pass
            yield '\n'
            yield str(environment.finalize(t_3(t_4(t_1('%d other record%s also matched; `errkb explain --all` shows %s with %s score%s.', (undefined(name='others') if l_0_others is missing else l_0_others), ('' if ((undefined(name='others') if l_0_others is missing else l_0_others) == 1) else 's'), ('it' if ((undefined(name='others') if l_0_others is missing else l_0_others) == 1) else 'them all'), ('its' if ((undefined(name='others') if l_0_others is missing else l_0_others) == 1) else 'their'), ('' if ((undefined(name='others') if l_0_others is missing else l_0_others) == 1) else 's')), 0), 'dim')))
            yield '\n'
    else:
        pass
        yield str(environment.finalize(t_4(t_1('No known error matches this %s.', (t_1('log (%d lines)', environment.getattr((undefined(name='e') if l_0_e is missing else l_0_e), 'lines')) if (environment.getattr((undefined(name='e') if l_0_e is missing else l_0_e), 'mode') == 'log') else 'text')), 0)))
        yield '\n'
        if (undefined(name='near') if l_0_near is missing else l_0_near):
            pass
            yield '\nSimilar, not exact (the message may have changed between versions):\n'
            template = environment.get_template('_explain_near.txt.j2', 'explain.txt.j2')
            gen = template.root_render_func(template.new_context(context.get_all(), True, {'e': l_0_e}))
            try:
                for event in gen:
                    yield event
            finally: gen.close()

blocks = {}
debug_info = '4=41&5=44&6=46&7=48&8=51&10=55&12=60&13=62&15=69&17=72&19=74&22=77&24=83&25=86&26=90&28=93&30=95&32=102&34=105&37=109&38=111&41=114'